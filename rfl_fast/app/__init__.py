"""The roof: the applications built on the library floors below.

The command line (:mod:`~rfl_fast.app.cli`), experiment files (:mod:`~rfl_fast.app.config`,
:mod:`~rfl_fast.app.runner`), the papers' experiments (:mod:`~rfl_fast.app.experiments`), the
scikit-learn estimators (:mod:`~rfl_fast.app.estimators`), the demo, the benchmarks
(:mod:`~rfl_fast.app.bench`, :mod:`~rfl_fast.app.sweep`, :mod:`~rfl_fast.app.timing`) and the
figures (:mod:`~rfl_fast.app.plotting`). Every name an application accepts (algorithms,
participation, step schedules, problems, data sources) is looked up in
:mod:`~rfl_fast.app.names`. Nothing below this floor imports it.
"""
