"""What people run around the model: the command line, the demo and its corpus, the attention
explorer and figures, the paper's experiments, corpus downloads and the HTTP server.

Everything here is built on engine/ and nn/; nothing below imports from here.
"""
