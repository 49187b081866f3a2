"""Fleets: the same checks on every node, each node judged against its fleet.

The data flow: :mod:`perfsuite.fleet.run` starts the suite on every node (``srun``,
``sbatch`` or ``mpiexec`` with a hostfile), each node writing its own run record into a
shared directory; :mod:`perfsuite.fleet.aggregate` reads those records into one
nodes x checks matrix per hardware profile; :mod:`perfsuite.fleet.judge` flags the nodes
that lie materially and significantly below their fleet; :mod:`perfsuite.fleet.drain`
lists them for schedulers (``drain.json``), and :mod:`perfsuite.report.fleet` words the
terminal list and the HTML page.
"""
