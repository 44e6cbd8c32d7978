"""Training (Appendix B): the loop, and the loss terms that can join it.

    trainer.py    Trainer: the training loop, validation, checkpoints, resume; train(), the one entry
    objective.py  the loss (summed cross-entropy) and LossTerm, what a term adds to an update
    guided.py     GuidedAlignment: attention (or the alignment head) taught a word aligner's links
    agreement.py  Agreement: both directions trained together to agree on attention
"""
