"""The two failures a user sees, each printed as one line by cli.main().

Exit status (an API): 0 success; 1 RuntimeFailure (nothing could be read or done, or an
internal error); 2 UsageError (bad usage or bad input).
"""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class RuntimeFailure(Exception):
    """Nothing could be read or done: printed as one line, exit status 1."""
