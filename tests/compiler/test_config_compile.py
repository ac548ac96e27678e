from __future__ import annotations

from omegaconf import OmegaConf

from evoharness.compiler.config_compile import to_plain


def test_to_plain_resolves_mappings_and_lists_and_leaves_plain_values() -> None:
    cfg = OmegaConf.create({"a": "${b}", "b": 2, "xs": [{"y": "${b}"}]})
    assert to_plain(cfg) == {"a": 2, "b": 2, "xs": [{"y": 2}]}
    plain = to_plain(cfg.xs)
    assert plain == [{"y": 2}] and type(plain) is list and type(plain[0]) is dict
    assert to_plain(3) == 3 and to_plain({"k": [1]}) == {"k": [1]}
