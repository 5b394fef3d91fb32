"""Offline stand-ins for repositories that Bazel 4.2.3's WORKSPACE suffix would download.

rules_cc: Debian's bazel-rules-cc is too new for Bazel 4.2.3, so cc/defs.bzl forwards each
macro to the native rule. remote_coverage_tools: the two filegroups every test needs (coverage
is not supported offline). Written by a repository rule so that they work the same whether
devmesh is the main workspace or an external one.
"""

_RULES_CC_DEFS = """\"\"\"rules_cc offline shim: forwards to Bazel's native C++ rules.\"\"\"
def cc_library(**kwargs):
    native.cc_library(**kwargs)
def cc_binary(**kwargs):
    native.cc_binary(**kwargs)
def cc_test(**kwargs):
    native.cc_test(**kwargs)
def cc_import(**kwargs):
    native.cc_import(**kwargs)
def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)
def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)
def cc_proto_library(**kwargs):
    native.cc_proto_library(**kwargs)
def objc_library(**kwargs):
    native.objc_library(**kwargs)
"""

def _rules_cc_shim_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"rules_cc\")\n")
    ctx.file("BUILD.bazel", "")
    ctx.file("cc/BUILD.bazel", "exports_files([\"defs.bzl\"])\n")
    ctx.file("cc/defs.bzl", _RULES_CC_DEFS)

rules_cc_shim = repository_rule(implementation = _rules_cc_shim_impl)

def _coverage_tools_shim_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"remote_coverage_tools\")\n")
    ctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])
filegroup(name = "coverage_report_generator", srcs = [])
filegroup(name = "lcov_merger", srcs = [])
""")

coverage_tools_shim = repository_rule(implementation = _coverage_tools_shim_impl)
