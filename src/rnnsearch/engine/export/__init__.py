"""A trained model out of PyTorch: `rnnsearch export`.

    onnx.py   the encoder and the decoder step as two ONNX graphs, a manifest and the tokenisers,
              checked against PyTorch before anything is written (runtime/: the torch-free runtime)
"""
