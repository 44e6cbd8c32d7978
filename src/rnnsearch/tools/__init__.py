"""What people look at and run beside the model: the demo and its corpus, the attention explorer,
heat maps and figures, a model live in the browser, the paper's experiments, toy tasks and corpus downloads.

    demo.py          `rnnsearch demo`: the built-in corpus trained and checked in minutes
    apple_corpus.py  the built-in English→Chinese corpus grown from *I ate an apple yesterday*
    explorer.py      the interactive alignment explorer: one self-contained HTML page
    browser.py       `rnnsearch export --format web`: a page that translates in the browser (its
                     scripts in web/: app.js the greedy search, tokenizer.js sentencepiece's rules)
    plotting.py      attention heat maps in the manner of the paper's Figure 3
    figures.py       `rnnsearch figure structure`: untrained vs trained attention
    experiments.py   `rnnsearch experiment`: the paper's comparisons, one command each
    toy.py           copy and reverse tasks for the quickstart and the tests
    download.py      `rnnsearch data get`: corpora downloaded, verified and laid out
                     (hansards_csc401.sha256 beside it: the pinned files of one corpus)

Built on engine/ and nn/; serve/ and cli/ sit above it.
"""
