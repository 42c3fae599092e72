"""The machinery that runs experiments: a learner may skip it.

The lessons (every module of :mod:`mlm_course` outside this folder) never import it. Here: the runner that calls the
lessons' training step for fine-tuning (:mod:`~mlm_course.lab.runner`), the run folder through which pretraining's
loop (the lessons' ``train_with_accelerate``) writes and resumes its checkpoints, precision and device choice, run
files, seeds, the experiment grids, the quick/full settings and the command line.
"""
