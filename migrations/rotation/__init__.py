"""Online key rotation: re-seal values under the primary key, re-index, check, retire.

* :mod:`.spec`: what the engine knows of one encrypted or blind-index column;
* :mod:`.jobs`, :mod:`.worker`, :mod:`.cas`: the job tables, the batch loop shared by every
  kind of job, and the compare-and-swap write that never overwrites a concurrent writer;
* :mod:`.reseal` (``rotate``), :mod:`.reindex`, :mod:`.verify`, :mod:`.status`,
  :mod:`.retire`: the jobs and reports themselves;
* :mod:`.progress` and :mod:`.cli`: the shell side (``sealstore rotate | status | verify |
  reindex``, ``sealstore keys retire | destroy``, ``sealstore db init``).

The public names are re-exported, lazily, by :mod:`sealstore.migrations`.
"""
