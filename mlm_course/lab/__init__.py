"""The machinery that runs experiments: a learner may skip it.

The lessons (every module of :mod:`mlm_course` outside this folder) never import it. Here: the runner that calls the
lessons' training step (:mod:`~mlm_course.lab.runner`), precision and device choice, run files, seeds, the
experiment grids, the quick/full settings and the command line.
"""
