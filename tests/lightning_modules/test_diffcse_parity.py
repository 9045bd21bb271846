"""DiffCSE's loss against the authors' code: voidism/DiffCSE at f724b2cc921efdfb4e4bd85cd7ca13a8f0d1f0cf.

The oracle below re-implements, in their order and with their tensor layout, ``cl_forward`` of ``diffcse/models.py``
(pooler ``cls``, ``before_mlp`` false, ``num_sent`` 2: the batch as ``(bs, 2, len)`` interleaved views, flattened;
the MLP over the flattened [CLS] vectors; ``g_pred = generator(mlm_input_ids, attention_mask)[0].argmax(-1)`` under
``no_grad``, ``g_pred[:, 0] = cls_token``, ``replaced = (g_pred != input_ids) * attention_mask``, ``e_inputs =
g_pred * attention_mask``; the discriminator with ``cls_input`` = the MLP output; ``Similarity`` = cosine / temp,
``CrossEntropyLoss`` against ``arange``; ``electra_head`` logits, ``CrossEntropyLoss`` over ``view(-1, 2)``;
``loss + lambda_weight * masked_lm_loss``) and the discriminator's ``cls_input`` path of their ``modeling_bert.py``
(``BertModel.forward``: the embedding output's first position replaced by ``cls_input`` before the encoder stack,
an additive extended attention mask). Their ``ProjectionMLP`` (``--batchnorm``) is the module's own head, in train
mode (batch statistics), as in their training.

Ours: ``DiffCSEModule.diffcse_losses`` on the same tiny encoder, generator, discriminator and heads, the same
masked rows; dropout off everywhere so both passes are deterministic. Loss to 1e-5 and every gradient within the
shared gradient tolerance (``tests.helpers.GRADIENT_TOL``: a few hundred fp32 ulps of the largest entry).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sts_lightning.embeddings.methods.mlm.objective import mask_generator, mask_rows
from sts_lightning.lightning_modules.simcse import set_dropout
from tests.helpers import GRADIENT_SENTENCES, assert_same_gradients


def _their_discriminator(bert, e_inputs, attention_mask, cls_input):
    """``BertModel.forward(..., cls_input=...)`` of their ``modeling_bert.py``: embeddings, first position replaced,
    the layers under ``(1 - mask) * min`` (their ``get_extended_attention_mask``, at fp32's most negative value)."""
    embedding_output = bert.embeddings(input_ids=e_inputs)
    embedding_output = torch.cat([cls_input.unsqueeze(1), embedding_output[:, 1:, :]], dim=1)
    extended = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    return bert.encoder(embedding_output, attention_mask=extended).last_hidden_state


def _their_cl_forward(module, input_ids, attention_mask, mlm_input_ids, temp, lambda_weight, cls_token):
    """``cl_forward`` (see the module docstring) on ``(bs, 2, len)`` tensors; returns the loss."""
    batch_size, num_sent = input_ids.size(0), input_ids.size(1)
    input_ids = input_ids.view((-1, input_ids.size(-1)))
    attention_mask = attention_mask.view((-1, attention_mask.size(-1)))
    outputs = module.encoder_model(input_ids, attention_mask=attention_mask)
    pooler_output = outputs.last_hidden_state[:, 0]
    pooler_output = pooler_output.view((batch_size, num_sent, pooler_output.size(-1)))
    pooler_output = pooler_output.view((batch_size * num_sent, pooler_output.size(-1)))
    pooler_output = module.mlp(pooler_output)
    pooler_output = pooler_output.view((batch_size, num_sent, pooler_output.size(-1)))
    mlm_input_ids = mlm_input_ids.view((-1, mlm_input_ids.size(-1)))
    with torch.no_grad():
        g_pred = module.generator(mlm_input_ids, attention_mask)[0].argmax(-1)
    g_pred[:, 0] = cls_token
    replaced = (g_pred != input_ids) * attention_mask
    e_inputs = g_pred * attention_mask
    hidden = _their_discriminator(module.discriminator.encoder, e_inputs, attention_mask,
                                  pooler_output.view((-1, pooler_output.size(-1))))
    z1, z2 = pooler_output[:, 0], pooler_output[:, 1]
    cos_sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temp
    labels = torch.arange(cos_sim.size(0)).long()
    loss = torch.nn.CrossEntropyLoss()(cos_sim, labels)
    e_labels = replaced.view(-1, replaced.size(-1))
    prediction_scores = module.discriminator.head(hidden)
    masked_lm_loss = torch.nn.CrossEntropyLoss()(prediction_scores.view(-1, 2), e_labels.view(-1))
    return loss + lambda_weight * masked_lm_loss


def _interleave(rows: torch.Tensor) -> torch.Tensor:
    """Our ``[s1..sB; s1..sB]`` rows as their ``(bs, 2, len)`` batch."""
    first, second = rows.chunk(2, dim=0)
    return torch.stack([first, second], dim=1)


def _gradients(module) -> dict[str, torch.Tensor]:
    grads = {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}
    module.zero_grad(set_to_none=True)
    return grads


@pytest.mark.parametrize("lambda_weight", [0.005, 1.0])
def test_loss_and_gradients_equal_the_authors_cl_forward(lambda_weight, tiny_model_dir, one_thread):
    from sts_lightning.lightning_modules.diffcse import DiffCSEModule

    torch.manual_seed(0)
    module = DiffCSEModule(str(tiny_model_dir), generator=f"{tiny_model_dir}-mlm", lambda_weight=lambda_weight,
                           dropout=0.0, eval_batch_size=4)
    set_dropout(module.generator, 0.0)
    module.train()
    sentences = GRADIENT_SENTENCES[:8]
    ids = module.tokenize(sentences)
    ids = [*ids, *ids]
    rows = module.rows(ids)
    masked, _ = mask_rows(module.collator, rows, mask_generator(5, 0, 0))
    assert (masked != rows.input_ids).any()  # the generator reads edited rows

    ours = module.diffcse_losses(ids, masked)
    ours["loss"].backward()
    ours_grads = _gradients(module)
    theirs = _their_cl_forward(module, _interleave(rows.input_ids), _interleave(rows.attention_mask),
                               _interleave(masked), module.hparams.temperature, lambda_weight,
                               module.encoder.tokenizer.cls_token_id)
    theirs.backward()
    their_grads = _gradients(module)

    assert abs(ours["loss"].item() - theirs.item()) <= 1e-5, (ours["loss"].item(), theirs.item())
    assert 0 < ours["replaced"].item() < 1 and ours["rtd_loss"].item() > 0
    assert not any(name.startswith("generator.") for name in ours_grads)  # frozen
    assert {n.split(".")[0] for n in ours_grads} == {"encoder_model", "mlp", "discriminator"}
    assert_same_gradients(ours_grads, their_grads)
