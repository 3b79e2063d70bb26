"""Installs the tbon package; with the checkout's build/lib/libtbon.so.0
beside it when there is one (make first), so that the package works
without TBON_LIBRARY wherever pip put it. pyproject.toml holds the rest."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class with_library(build_py):
    def run(self):
        super().run()
        build = os.environ.get("TBON_BUILD_DIR") or os.path.join(HERE, "..", "build")
        found = sorted(glob.glob(os.path.join(build, "lib", "libtbon.so.0.*")))
        if found:
            dest = os.path.join(self.build_lib, "tbon", "_lib")
            os.makedirs(dest, exist_ok=True)
            shutil.copyfile(found[-1], os.path.join(dest, "libtbon.so.0"))


setup(cmdclass={"build_py": with_library})
