"""Stand-in for @rules_cc//cc:defs.bzl: the C++ rules are Bazel 4's native ones.

This project builds no C++; Bazel 4 only loads this file for its own default
toolchains. See ../../README.md.
"""

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
