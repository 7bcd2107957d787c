"""mlbook: the library behind the positional-encodings chapter.

`mlbook.transformer` holds the maths (encodings, attention, caches, tiny models);
`mlbook.viz` builds the figures; `mlbook.experiments` trains and evaluates tiny models.
"""

__version__ = "0.1.0"
