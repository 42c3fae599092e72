"""The machinery that runs experiments: a learner may skip it.

The lessons (every module of :mod:`mlm_course` outside this folder) never import it. Here: what the commands' runs
do beside the lessons' loop with Accelerate (:mod:`~mlm_course.lab.training_run`: metrics, checkpoints and exact
resume, the best dev model, early stopping), their Accelerator (:mod:`~mlm_course.lab.hardware`), run files, seeds,
the experiment grids, the quick/full settings and the command line.
"""
