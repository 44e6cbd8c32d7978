"""Training (Appendix B): the loop, and the loss terms that can join it.

    trainer.py    Trainer: the training loop (run, train_epoch), validation, checkpoints; train(), the entry
    state.py      what a run keeps and logs: TrainState, Step and Window (sums for the log), MetricsLog,
                  the validation set and its scores, the model files of a checkpoint
    launch.py     what a run starts from and stops by: model directory and resume, seed and threads,
                  the optimizer, SIGINT/SIGTERM
    objective.py  the loss (summed cross-entropy) and LossTerm, what a term adds to an update
    guided.py     GuidedAlignment: attention (or the alignment head) taught a word aligner's links
    agreement.py  Agreement: both directions trained together to agree on attention
"""
