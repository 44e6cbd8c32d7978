"""Training (Appendix B): the loop, and the loss terms that can join it.

    trainer.py    Trainer: the training loop, validation, checkpoints, resume
    guided.py     guided alignment: attention (or the alignment head) taught a word aligner's links
    agreement.py  agreement: both directions trained together to agree on attention
"""
