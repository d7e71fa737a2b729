"""The bundled demo: a simulated fleet's landing zone (:mod:`~kuration.demo.corpus`), what
``kuration demo`` and ``scripts/demo.sh`` curate."""
