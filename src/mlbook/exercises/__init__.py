"""Checkers for the notebooks' exercises: each says what is wrong, not only that something is.

A checker calls the reader's function on small cases, compares it with the library (or an
independent oracle), and when they disagree tries the usual mistakes (a flipped sign, the
other pair layout, an off-by-one) to name the one that was made. It prints one verdict and
returns True or False; it never raises, so a notebook cell with an unfinished answer still
runs. One module per section; everything is re-exported here, so notebooks write
`from mlbook.exercises import check_...`.
"""

from mlbook.exercises import (
    absolute, after_rope, alibi, configs, drills, extension, learned, relative, rope, sinks, systems,
)
from mlbook.exercises.absolute import *  # noqa: F401,F403
from mlbook.exercises.after_rope import *  # noqa: F401,F403
from mlbook.exercises.alibi import *  # noqa: F401,F403
from mlbook.exercises.configs import *  # noqa: F401,F403
from mlbook.exercises.drills import *  # noqa: F401,F403
from mlbook.exercises.extension import *  # noqa: F401,F403
from mlbook.exercises.learned import *  # noqa: F401,F403
from mlbook.exercises.relative import *  # noqa: F401,F403
from mlbook.exercises.rope import *  # noqa: F401,F403
from mlbook.exercises.sinks import *  # noqa: F401,F403
from mlbook.exercises.systems import *  # noqa: F401,F403

__all__ = [
    name
    for module in (absolute, learned, relative, rope, alibi, extension, sinks, after_rope, drills, systems, configs)
    for name in module.__all__
]
