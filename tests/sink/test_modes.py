"""The write modes: one class per mode of the contract, each answering for its traits."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.modes import mode_of
from onceover_jobs.sink.modes.base import VisibleAsAppended

from onceover.modes import MODES, TRAITS, traits_of


@pytest.mark.parametrize("name", MODES)
def test_every_mode_of_the_contract_has_its_class(name: str) -> None:
    mode = mode_of(name)
    assert mode.name == name
    assert mode.traits is traits_of(name)
    assert mode.traits in TRAITS.values()


@pytest.mark.parametrize("name", MODES)
def test_a_mode_publishes_at_the_end_of_a_batch_exactly_when_its_traits_say(name: str) -> None:
    """Visible as appended: nothing to publish, an intent settled as done."""
    visible = isinstance(mode_of(name), VisibleAsAppended)
    assert visible == (traits_of(name).publish == "none")
    assert visible == (traits_of(name).settle == "as_appended")


@pytest.mark.parametrize("lookup", [mode_of, traits_of])
def test_an_unknown_mode_is_refused_naming_the_modes(lookup: object) -> None:
    with pytest.raises(ValueError, match="unknown write mode 'overwrite'; the modes are pending"):
        lookup("overwrite")  # type: ignore[operator]
