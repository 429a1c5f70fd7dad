"""A GPT-2-style decoder-only transformer with causal self-attention.

The defaults are GPT-2 small (124,439,808 parameters: vocabulary 50,257,
context 1,024, 12 layers of width 768 with 12 heads, output layer tied to the
token embedding). Pre-norm blocks, GELU MLPs four times the width.

    >>> import jax.numpy as jnp
    >>> from tpukit import zoo
    >>> tiny = zoo.create("gpt_small", vocab_size=256, depth=2, width=64, num_heads=4,
    ...                   context_length=32)
    >>> tiny(jnp.zeros((2, 32), jnp.int32)).shape
    (2, 32, 256)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from tpukit._compat import module_list
from tpukit._errors import ArgumentError
from tpukit.zoo import _init
from tpukit.zoo._base import ZooModel

_normal = _init.normal(0.02)


class CausalSelfAttention(nnx.Module):
    """Multi-head attention where position t sees positions 0..t only."""

    def __init__(self, width: int, num_heads: int, depth: int, *, kw: dict, rngs: nnx.Rngs):
        self.num_heads = num_heads
        self.c_attn = nnx.Linear(
            width, 3 * width, kernel_init=_normal, bias_init=_init.zeros, rngs=rngs, **kw
        )
        proj_init = _init.normal(0.02 / math.sqrt(2 * depth))
        self.c_proj = nnx.Linear(
            width, width, kernel_init=proj_init, bias_init=_init.zeros, rngs=rngs, **kw
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, d = x.shape
        h = self.num_heads
        q, k, v = jnp.split(self.c_attn(x).reshape(b, t, 3 * h, d // h), 3, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // h)
        causal = jnp.tril(jnp.ones((t, t), bool))
        scores = jnp.where(causal, scores.astype(jnp.float32), -jnp.inf)
        weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, d)
        return self.c_proj(out)


class Block(nnx.Module):
    """LayerNorm, attention, residual; LayerNorm, MLP, residual."""

    def __init__(self, width: int, num_heads: int, depth: int, dropout: float, *, kw, rngs):
        self.ln_1 = nnx.LayerNorm(width, epsilon=1e-5, rngs=rngs, **_init.NORM, **kw)
        self.attn = CausalSelfAttention(width, num_heads, depth, kw=kw, rngs=rngs)
        self.ln_2 = nnx.LayerNorm(width, epsilon=1e-5, rngs=rngs, **_init.NORM, **kw)
        proj_init = _init.normal(0.02 / math.sqrt(2 * depth))
        self.c_fc = nnx.Linear(
            width, 4 * width, kernel_init=_normal, bias_init=_init.zeros, rngs=rngs, **kw
        )
        self.c_proj = nnx.Linear(
            4 * width, width, kernel_init=proj_init, bias_init=_init.zeros, rngs=rngs, **kw
        )
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.dropout(self.attn(self.ln_1(x)))
        return x + self.dropout(self.c_proj(jax.nn.gelu(self.c_fc(self.ln_2(x)))))


class GPT(ZooModel):
    """Decoder-only transformer language model; maps token ids to next-token logits.

    Args:
      vocab_size: number of token ids (50,257 for GPT-2's tokenizer).
      depth: number of transformer blocks (12).
      width: model width (768); must divide evenly by ``num_heads``.
      num_heads: attention heads (12).
      context_length: longest sequence, and the length ``flops_per_example`` assumes (1,024).
      dropout: rate on the embeddings and on each residual branch (0.1), train mode only.
      dtype: compute dtype (float32 or bfloat16); attention softmax runs in float32.

    Input: int token ids of shape ``(batch, t)`` with ``t <= context_length``.
    Output: logits of shape ``(batch, t, vocab_size)``.
    """

    reference = "Radford et al. 2019, GPT-2 (small); causal attention as in Vaswani et al. 2017"

    def __init__(
        self,
        *,
        vocab_size: int = 50257,
        depth: int = 12,
        width: int = 768,
        num_heads: int = 12,
        context_length: int = 1024,
        dropout: float = 0.1,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if width % num_heads:
            raise ArgumentError(
                f"width must be a multiple of num_heads; got width={width}, "
                f"num_heads={num_heads}. Try width={num_heads * max(1, width // num_heads)}."
            )
        kw = dict(dtype=dtype, param_dtype=param_dtype)
        self.context_length = context_length
        self.wte = nnx.Embed(vocab_size, width, embedding_init=_normal, rngs=rngs, **kw)
        self.wpe = nnx.Embed(context_length, width, embedding_init=_normal, rngs=rngs, **kw)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.blocks = module_list(
            [Block(width, num_heads, depth, dropout, kw=kw, rngs=rngs) for _ in range(depth)]
        )
        self.ln_f = nnx.LayerNorm(width, epsilon=1e-5, rngs=rngs, **_init.NORM, **kw)
        t, d = context_length, width
        self.input_shape = (context_length,)
        self.flops_per_example = depth * (24 * t * d * d + 4 * t * t * d) + 2 * t * d * vocab_size

    def __call__(self, tokens: jax.Array) -> jax.Array:
        t = tokens.shape[1]
        if t > self.context_length:
            raise ArgumentError(
                f"sequence length {t} is longer than context_length={self.context_length}; "
                "crop the tokens or create the model with a larger context_length."
            )
        x = self.dropout(self.wte(tokens) + self.wpe(jnp.arange(t)))
        for block in self.blocks:
            x = block(x)
        return self.wte.attend(self.ln_f(x))
