"""An ``fft``'s FLOPs, counted as XLA's ``HloCostAnalysis::HandleFft`` counts them.

2 (a multiply-add) x 4 (multiply-adds of a complex multiply) x the product of
``log2(length)`` over ``fft_length`` x the elements of the input. Not a matmul: the
dot/conv FLOPs leave it out, all FLOPs hold it (cut of the v6e ``fft_complex`` pair's
lowered module: its three ``jnp.fft`` calls, see ``benchmarks/hlo_pairs/v6e``).
"""

from tpukit.hlo import parse_hlo
from tpukit.hlo.analysis import executed, fft_flops

FFTS = """HloModule jit_fft_complex
ENTRY main.4 {
  x.1 = c64[256]{0} parameter(0)
  fft.1 = c64[256]{0} fft(x.1), fft_type=FFT, fft_length={256}
  y.1 = f32[8,64]{1,0} parameter(1)
  fft.3 = c64[8,33]{1,0} fft(y.1), fft_type=RFFT, fft_length={64}
  fft.5 = f32[8,64]{1,0} fft(fft.3), fft_type=IRFFT, fft_length={64}
  image.1 = f32[16,32]{1,0} parameter(2)
  fft.7 = c64[16,17]{1,0} fft(image.1), fft_type=RFFT, fft_length={16,32}
  ROOT tuple.1 = (c64[256]{0}, f32[8,64]{1,0}, c64[16,17]{1,0}) tuple(fft.1, fft.5, fft.7)
}"""


def test_each_fft_counts_xla_s_flops_in_all_flops_and_none_in_matmul_flops():
    module = parse_hlo(FFTS)
    found = {
        name: fft_flops(module.instruction(name), module)
        for name in ("fft.1", "fft.3", "fft.5", "fft.7")
    }
    assert found == {
        "fft.1": 2 * 4 * 8 * 256,  # log2(256) = 8, 256 complex inputs
        "fft.3": 2 * 4 * 6 * 8 * 64,  # an RFFT reads the real input
        "fft.5": 2 * 4 * 6 * 8 * 33,  # an IRFFT the half spectrum
        "fft.7": 2 * 4 * (4 * 5) * 16 * 32,  # two dims: log2(16) * log2(32)
    }
    run = executed(module)
    assert run.all_flops == sum(found.values()) and run.dot_flops == 0
