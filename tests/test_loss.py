"""The fused training loss and the packed output layer: same numbers as the plain path."""

import pytest
import torch
import torch.nn.functional as F
from conftest import random_batch, tiny_model
from test_model import teacher_inputs

from rnnsearch.engine.data.vocab import PAD
from rnnsearch.engine.train.objective import sequence_loss


def padded_targets(seed=0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(4, 11, (3, 5), generator=g)
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    return target


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fused_loss_and_gradient_equal_torch_cross_entropy(smoothing):
    target = padded_targets()
    logits = (torch.randn(3, 5, 11, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 4)
    ours = logits.clone().requires_grad_(True)
    theirs = logits.clone().requires_grad_(True)
    a = sequence_loss(ours, target, smoothing)
    b = F.cross_entropy(theirs.reshape(-1, 11), target.reshape(-1), ignore_index=PAD, reduction="sum",
                        label_smoothing=smoothing)
    assert a.item() == pytest.approx(b.item(), rel=1e-12)
    (0.37 * a).backward()
    (0.37 * b).backward()
    assert torch.allclose(ours.grad, theirs.grad, atol=1e-12)
    assert (ours.grad[target == PAD] == 0).all()  # padding gets no gradient
    # the packed form (real tokens only) gives the same loss
    real = target != PAD
    assert float(sequence_loss(logits[real], target[real], smoothing)) == pytest.approx(b.item(), rel=1e-12)


def test_fused_loss_passes_gradcheck_and_stays_finite_when_the_target_is_improbable():
    target = torch.tensor([5, 2, 7])
    logits = torch.randn(3, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: sequence_loss(x, target, 0.1), (logits,))
    far = torch.zeros(3, 9)
    far[:, 0] = 200.0  # p(target) underflows to 0 in fp32; the loss must stay finite (≈ 600)
    loss = sequence_loss(far, target)
    assert torch.isfinite(loss) and float(loss) == pytest.approx(600.0, rel=1e-4)


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_packed_logits_are_the_real_positions_of_the_full_ones(arch):
    model = tiny_model(arch)
    src, mask = random_batch([4, 6, 2], seed=2)
    tgt_in = teacher_inputs(3, 5)
    tgt_in[1, 3:] = PAD
    tgt_in[2, 2:] = PAD
    full, attn = model(src, mask, tgt_in, log_probs=False)
    packed, attn2 = model(src, mask, tgt_in, log_probs=False, packed=True)
    assert packed.shape == (int((tgt_in != PAD).sum()), full.size(-1))
    assert torch.allclose(packed, full[tgt_in != PAD], atol=1e-12)
    assert (attn is None and attn2 is None) or torch.equal(attn, attn2)
