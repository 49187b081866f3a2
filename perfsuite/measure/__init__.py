"""Measuring: the timing loop, the sample sources, the machine probe, the noise guard.

Everything here produces readings and the conditions they were taken under; nothing here
decides a verdict (:mod:`perfsuite.judge`) or writes a file (:mod:`perfsuite.store`).
"""
