"""devmesh_dependencies(): every external repository devmesh needs, declared with `maybe`.

Call it from the WORKSPACE of any workspace that depends on @devmesh:

    local_repository(name = "devmesh", path = "/path/to/devmesh")
    load("@devmesh//:deps.bzl", "devmesh_dependencies")
    devmesh_dependencies()

All repositories point at system files installed by tools/install.sh (Debian packages), so
nothing is downloaded.
"""

load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load("//third_party:cuda_configure.bzl", "cuda_configure")
load("//third_party:offline_shims.bzl", "coverage_tools_shim", "rules_cc_shim")

def _build_file(name):
    # A label string: new_local_repository wants a string, resolved in the calling workspace.
    return "@devmesh//third_party:" + name

def devmesh_dependencies():
    """Declares every repository devmesh needs that is not declared already."""
    maybe(
        native.local_repository,
        name = "rules_java",
        path = "/usr/share/bazel/rules/java",
    )
    maybe(rules_cc_shim, name = "rules_cc")
    maybe(coverage_tools_shim, name = "remote_coverage_tools")
    maybe(
        native.new_local_repository,
        name = "com_google_absl",
        path = "/usr",
        build_file = _build_file("absl.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "com_google_googletest",
        path = "/usr",
        build_file = _build_file("gtest.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "com_github_google_benchmark",
        path = "/usr",
        build_file = _build_file("benchmark.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "gloo",
        path = "/usr",
        build_file = _build_file("gloo.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "ucx",
        path = "/usr",
        build_file = _build_file("ucx.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "libuv",
        path = "/usr",
        build_file = _build_file("libuv.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "curl",
        path = "/usr",
        build_file = _build_file("curl.BUILD"),
    )
    maybe(
        native.new_local_repository,
        name = "nlohmann_json",
        path = "/usr",
        build_file = _build_file("nlohmann_json.BUILD"),
    )
    maybe(
        cuda_configure,
        name = "local_cuda",
    )
