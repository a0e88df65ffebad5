"""Checks that the notebooks' visible and hidden tests call."""

from plmcourse.grading.attention import (
    check_causal_mask,
    check_multi_head_attention,
    check_scaled_dot_product_attention,
    check_softmax,
)
from plmcourse.grading.core import CheckFailed
from plmcourse.grading.welcome import check_normalize

__all__ = [
    "CheckFailed",
    "check_normalize",
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_causal_mask",
    "check_multi_head_attention",
]
