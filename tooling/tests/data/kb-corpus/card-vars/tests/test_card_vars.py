import subprocess
import sys

import card_vars
import pytest
import torch
from card_vars.layers import Double


@pytest.mark.kernels_ci
def test_double():
    torch.testing.assert_close(card_vars.double(torch.arange(3.0)), torch.tensor([0.0, 2.0, 4.0]))
    torch.testing.assert_close(Double()(torch.ones(2)), torch.full((2,), 2.0))


@pytest.mark.kernels_ci
def test_a_child_python_imports_the_kernel():
    code = "import card_vars, torch; print(card_vars.double(torch.tensor([1.5])).item())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "3.0"
