"""perfsuite: performance checks for deep-learning stacks, as a pytest plugin."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("perfsuite")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
