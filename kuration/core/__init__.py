"""The read side under the names seed 000 gives it: :mod:`kuration.core.loaders` (numpy only)
and :mod:`kuration.core.torch` (the ``[torch]`` extra). Both re-export :mod:`kuration.read`
and :mod:`kuration.torch`, where the code lives; importing this package loads nothing else.
"""
