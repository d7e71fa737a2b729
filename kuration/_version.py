"""The release of Kuration: ``kuration.__version__``, also folded into every run fingerprint.

Its own module, below everything, so the modules that fingerprint a run read it without
importing the ``kuration`` package from inside it.
"""

__version__ = "0.1.0"
