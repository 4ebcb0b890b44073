# lit configuration for Coll's golden tests of the command-line tools.
import os
import lit.formats
import lit.util

config.name = "Coll"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test", ".coll", ".xml"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.coll_obj_root, "tests", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.coll_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
# Keep tool output free of colour codes and locale surprises.
config.environment["LC_ALL"] = "C"
for var in ["COLL_DEBUG", "COLL_WATCHDOG_MS"]:
    config.environment.pop(var, None)

config.substitutions.append(("%FileCheck", config.filecheck))
config.substitutions.append(("FileCheck", config.filecheck))
if config.not_tool:
    config.substitutions.append(("%not", config.not_tool))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%src_root", config.coll_src_root))
config.substitutions.append(("%msccl_xml", config.msccl_xml_dir))

for feature in config.coll_features:
    config.available_features.add(feature)
if os.path.isdir(config.msccl_xml_dir):
    config.available_features.add("msccl-xml")
# The rendering tests draw pictures with rsvg-convert (Debian's librsvg2-bin,
# installed by scripts/setup.sh) and are unsupported without it.
if lit.util.which("rsvg-convert", config.environment["PATH"]):
    config.available_features.add("rsvg-convert")
else:
    lit_config.note("rsvg-convert not found (Debian: librsvg2-bin): the SVG rendering "
                    "tests are unsupported")
