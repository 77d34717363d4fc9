"""The version of rolecall (one place; the package and the documents it writes quote it)."""

__version__ = "0.1.0"
