"""The operator's provider settings: flags and SEED_AGENTS_* variables reach the providers."""

import argparse

import pytest

from seed_agents.server.config import ConfigError, add_arguments, load_config
from seed_agents.server.providers.network import NetworkPolicy
from seed_agents.server.providers.registry import ProviderSettings


def parse(argv, env=None):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return load_config(parser.parse_args(argv), env=env or {})


def test_defaults():
    cfg = parse([])
    assert ProviderSettings.from_config(cfg) == ProviderSettings(60.0, 60.0, False)
    assert NetworkPolicy.for_server(cfg.provider_networks, cfg.host) == NetworkPolicy.parse(
        "public,loopback,private")
    assert NetworkPolicy.for_server(cfg.provider_networks, "0.0.0.0") == NetworkPolicy.parse("public")


def test_flags_and_environment():
    cfg = parse(["--provider-first-token-timeout", "2.5", "--allow-provider-base-url", "yes",
                 "--provider-networks", "public,10.0.5.7/32"],
                env={"SEED_AGENTS_PROVIDER_IDLE_TIMEOUT": "7", "SEED_AGENTS_PROVIDER_NETWORKS": "any"})
    assert ProviderSettings.from_config(cfg) == ProviderSettings(2.5, 7.0, True)
    assert cfg.provider_networks == "public,10.0.5.7/32"   # the flag wins over the variable
    cfg = parse([], env={"SEED_AGENTS_ALLOW_PROVIDER_BASE_URL": "false"})
    assert cfg.allow_provider_base_url is False


def test_bad_values_stop_the_server_with_a_message():
    with pytest.raises(ConfigError, match="SEED_AGENTS_PROVIDER_NETWORKS='intranet'"):
        parse([], env={"SEED_AGENTS_PROVIDER_NETWORKS": "intranet"})
    with pytest.raises(ConfigError, match="SEED_AGENTS_ALLOW_PROVIDER_BASE_URL"):
        parse([], env={"SEED_AGENTS_ALLOW_PROVIDER_BASE_URL": "maybe"})
    with pytest.raises(ConfigError):
        parse(["--provider-networks", "10.0.0.0/33"])
