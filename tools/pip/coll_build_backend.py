"""The build backend of `pip install .` (pyproject.toml): scikit-build-core,
told which Python runs the install, so that coll.torch's C++ backend
(runtime/python/CMakeLists.txt) is built against that Python's torch:
COLL_TORCH_PYTHON is this interpreter unless the caller set it
(-C cmake.define.COLL_TORCH_PYTHON=...). scikit-build-core's own Python
hints stay off (pyproject.toml says why)."""

import sys

import scikit_build_core.build as _skb


def _settings(config_settings):
    settings = dict(config_settings or {})
    settings.setdefault("cmake.define.COLL_TORCH_PYTHON", sys.executable)
    return settings


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_wheel(wheel_directory, _settings(config_settings), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_editable(wheel_directory, _settings(config_settings), metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    return _skb.build_sdist(sdist_directory, config_settings)


def get_requires_for_build_wheel(config_settings=None):
    return _skb.get_requires_for_build_wheel(_settings(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return _skb.get_requires_for_build_editable(_settings(config_settings))


def get_requires_for_build_sdist(config_settings=None):
    return _skb.get_requires_for_build_sdist(config_settings)


if hasattr(_skb, "prepare_metadata_for_build_wheel"):
    def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
        return _skb.prepare_metadata_for_build_wheel(metadata_directory,
                                                     _settings(config_settings))

if hasattr(_skb, "prepare_metadata_for_build_editable"):
    def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
        return _skb.prepare_metadata_for_build_editable(metadata_directory,
                                                        _settings(config_settings))
