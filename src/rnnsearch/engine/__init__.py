"""The system around the network: text in, text out, and the training that gets there, in six rooms
and three modules that all of them share.

    data/           parallel text, vocabularies, batches, corpora encoded once
    align/          word alignment: links from attention, AER, eflomal's links on the training corpus
    decode/         sentences to translations: the Translator, inline tags, BLEU
    accel/          the speed paths, each a drop-in for a plain path of nn/ (``plain: true``: off)
    train/          the training loop and the loss terms that can join it
    export/         a trained model out of PyTorch: ONNX graphs checked against it
    checkpoint.py   model directories: weights, config, vocabularies, resumable state
    distributed.py  the device and, under torchrun, the process group
    precision.py    `precision: auto`: bf16 only where it measures faster here

Imports run downwards only: data/ and the shared modules < align/ < accel/ < decode/ < train/,
export/;
engine/ uses nn/ and the root modules, never tools/, serve/ or cli/.
"""
