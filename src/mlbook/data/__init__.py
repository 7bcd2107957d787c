"""Reference data the book's tables are built from (each row with its sources)."""

from mlbook.data.model_families import MODEL_FAMILIES, ModelFamily, family  # noqa: F401

__all__ = ["MODEL_FAMILIES", "ModelFamily", "family"]
