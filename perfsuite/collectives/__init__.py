"""Collectives across real processes: the rank-side worker, its launcher, and the alpha-beta model.

The pytest process never becomes a rank.  A check starts :mod:`perfsuite.collectives.worker`
through a launcher (``mpiexec -n N`` by default, or ``srun``), the ranks measure, and rank 0
prints the samples as JSON lines that the plugin judges like any other samples.
"""
