# SPDX-License-Identifier: Apache-2.0
"""pip install ./python: the package mega_kws, told where its native library is.

At build time this looks for an installed libmega_kws.so.N (the Debian package
libmega-kwsN's /usr/lib/<triplet>/libmega_kws.so.N, or a `cmake --install`
into /usr/local) and writes its path into mega_kws/_config.py. Where none is
installed, or with MEGA_KWS_BUILD_NATIVE=1, it builds the library from the
source tree around this directory with CMake (the runtime alone: no CLI,
tests or benchmarks) and puts it, with the demo model, into the package.
Either way it prints which (pip shows it with -v), and at run time
mega_kws.library_path() names the library loaded. MEGA_KWS_LIBRARY overrides
both at run time; set at install time, it makes this step record nothing.
"""

import importlib.util
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)  # the repository, when installing from it


def _native():
    """mega_kws/_native.py, loaded by path (importing the package would need numpy)."""
    spec = importlib.util.spec_from_file_location("_mega_kws_native", os.path.join(HERE, "mega_kws", "_native.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _say(msg):
    print(f"mega_kws: {msg}", file=sys.stderr)


def _installed_model(library):
    """The demo model installed beside the library: PREFIX/share/mega_kws/models."""
    prefix = os.path.dirname(library)
    while os.path.basename(prefix) not in ("lib", "lib64") and prefix != os.path.dirname(prefix):
        prefix = os.path.dirname(prefix)
    model = os.path.join(os.path.dirname(prefix), "share", "mega_kws", "models", "sc10-demo.mega")
    return model if os.path.exists(model) else None


def _build_native(build_temp, native):
    """Builds libmega_kws from the source tree; returns its path."""
    if not os.path.exists(os.path.join(SOURCE, "CMakeLists.txt")) or not os.path.isdir(os.path.join(SOURCE, "runtime")):
        raise SystemExit(f"mega_kws: no installed {native.LIBRARY_NAME} in {', '.join(native.library_dirs())}, and no "
                         f"source tree at {SOURCE} to build it from: install the Debian package "
                         f"libmega-kws{native.SOVERSION} (or cmake --install the project) first")
    cmake = shutil.which("cmake")
    if not cmake:
        raise SystemExit(f"mega_kws: no installed {native.LIBRARY_NAME}, and no cmake to build it with")
    build = os.path.join(os.path.abspath(build_temp), "native")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _say(f"building {native.LIBRARY_NAME} from {SOURCE} in {build}")
    subprocess.check_call([cmake, "-S", SOURCE, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release",
                           "-DMEGA_BUILD_APPS=OFF", "-DMEGA_BUILD_TESTS=OFF", "-DMEGA_BUILD_BENCH=OFF"],
                          stdout=sys.stderr)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    subprocess.check_call([cmake, "--build", build, "--target", "mega_kws", "-j", jobs], stdout=sys.stderr)
    return os.path.join(build, native.LIBRARY_NAME)


class BuildPy(build_py):
    def run(self):
        super().run()
        native = _native()
        pkg = os.path.join(self.build_lib, "mega_kws")
        if os.environ.get("MEGA_KWS_LIBRARY"):
            # the library is given at run time (as the tests do): nothing recorded, nothing built
            _say(f"MEGA_KWS_LIBRARY is set ({os.environ['MEGA_KWS_LIBRARY']}): the package will load "
                 "what it names at run time; no library recorded or built")
            return
        installed = None if os.environ.get("MEGA_KWS_BUILD_NATIVE") == "1" else native.installed_library()
        if installed:
            _say(f"using the installed library {installed}")
            lines = [f"LIBRARY = {installed!r}", f"MODEL = {_installed_model(installed)!r}"]
        else:
            built = _build_native(self.get_finalized_command("build").build_temp, native)
            shutil.copyfile(built, os.path.join(pkg, native.LIBRARY_NAME))
            shutil.copyfile(os.path.join(SOURCE, "models", "sc10-demo.mega"), os.path.join(pkg, "sc10-demo.mega"))
            _say(f"built {native.LIBRARY_NAME} into the package (with the demo model)")
            lines = ["import os",
                     "_HERE = os.path.dirname(os.path.abspath(__file__))",
                     f"LIBRARY = os.path.join(_HERE, {native.LIBRARY_NAME!r})",
                     "MODEL = os.path.join(_HERE, 'sc10-demo.mega')"]
        with open(os.path.join(pkg, "_config.py"), "w") as f:
            f.write("# Written by pip install (python/setup.py): the library (and demo model) this package uses.\n")
            f.write("\n".join(lines) + "\n")


setup(cmdclass={"build_py": BuildPy})
