"""`OptionError`: a model option (a constructor argument that a config or the command line sets) that cannot work.

Constructors raise it, not a bare ValueError, so that the task commands can tell a bad option from a bug: a command
ends with the message (which names the option and says what to give) instead of a traceback
(`core.training.cli`). Some options can only be checked once the data has fixed the sizes: the captioning decoder
and the SAN are built when a run sets up, after the command line was read, so the type of an option cannot refuse
them all.
"""


class OptionError(ValueError):
    """A model option with a value the model cannot be built with; the message names the option."""
