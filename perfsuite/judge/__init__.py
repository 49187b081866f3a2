"""Judging: statistics, the verdict, the family correction, outcomes and trends.

Pure functions over readings and references handed in: nothing here reads or writes a file
(:mod:`perfsuite.store`) or builds a sentence (:mod:`perfsuite.report`).
"""
