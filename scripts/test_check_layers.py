#!/usr/bin/env python3
"""Proves that scripts/check_layers.py bites: for each rule of the tables on
docs/architecture.md ("Layer rules"), an include that breaks it is fed to
the check, which must name it; the same files without it must pass.

    python3 scripts/test_check_layers.py     (run by `make layers`)
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402

PAGE = os.path.join(check_layers.ROOT, check_layers.PAGE)


def page_rules():
    with open(PAGE, encoding="utf-8") as f:
        return check_layers.parse_rules(f.read())


# A small tree that keeps every rule: each folder imports one it may.
CLEAN = {
    "src/protocol/routes.h": "#pragma once\n#include <string>\n",
    "src/config/config.h": '#pragma once\n#include "protocol/routes.h"\n',
    "src/auth/jwt.h": '#pragma once\n#include <memory>\n#include "config/config.h"\n',
    "src/proxy/exchange.h": '#pragma once\n#include "auth/jwt.h"\n',
    "src/proxy/proxy_context.h": '#pragma once\n#include <mutex>\n#include "proxy/exchange.h"\n',
    "src/proxy/tls_context.h": "#pragma once\n",
    "src/admin/backend.h": '#pragma once\n#include "proxy/proxy_context.h"\n',
    "src/admin/metrics.cc": '#include "admin/backend.h"\n#include "proxy/tls_context.h"\n',
    "src/app/gateway.h": '#pragma once\n#include "admin/backend.h"\n#include "proxy/exchange.h"\n',
    "src/main.cc": '#include "app/gateway.h"\n',
}


def check(extra):
    layers, rules = page_rules()
    sources = dict(CLEAN)
    for path, line in extra.items():
        sources[path] = sources.get(path, "") + line + "\n"
    problems, graph = check_layers.check_includes(sources, layers, rules)
    return problems + check_layers.include_cycles(graph)


class PageRules(unittest.TestCase):
    def test_the_page_states_the_rules_the_design_asks_for(self):
        layers, rules = page_rules()
        self.assertEqual(layers["protocol"], set())
        for plane in ("admin", "app", "fleet"):
            self.assertNotIn(plane, layers["proxy"])
        self.assertIn("auth", layers["proxy"])  # the data plane authenticates
        self.assertIn("admission", layers["proxy"])  # ... and calls admission's steps
        self.assertEqual([f for f, deps in layers.items() if "admission" in deps], ["proxy"])
        self.assertEqual([f for f, deps in layers.items() if "app" in deps], ["main"])
        self.assertEqual({tuple(r[0]) for r in rules},
                         {("src/admin/",), ("src/auth/", "src/admission/")})

    def test_a_folder_row_naming_a_folder_below_it_is_refused(self):
        page = ("## Layer rules\n\n| folder | may import |\n|---|---|\n"
                "| `a/` | `b/` |\n| `b/` | nothing |\n\n"
                "| files | may not include | except | why |\n|---|---|---|---|\n"
                "| `src/b/` | `<thread>` | | |\n")
        with self.assertRaisesRegex(check_layers.RuleError, "a/ may import b/"):
            check_layers.parse_rules(page)

    def test_a_page_without_the_include_table_is_refused(self):
        page = "## Layer rules\n\n| folder | may import |\n|---|---|\n| `a/` | nothing |\n"
        with self.assertRaises(check_layers.RuleError):
            check_layers.parse_rules(page)


class Violations(unittest.TestCase):
    def assertRefused(self, extra, words):
        problems = check(extra)
        self.assertTrue(any(all(w in p for w in words) for p in problems),
                        f"expected a problem with {words}, got {problems}")

    def test_the_clean_tree_passes(self):
        self.assertEqual(check({}), [])

    def test_a_layer_pair_the_table_forbids(self):
        self.assertRefused({"src/proxy/exchange.h": '#include "fleet/fleet_sync.h"'},
                           ["src/proxy/exchange.h:3", "proxy/ may not import fleet/"])
        self.assertRefused({"src/protocol/routes.h": '#include "config/config.h"'},
                           ["protocol/ may not import config/"])
        self.assertRefused({"src/auth/jwt.h": '#include "datalayer/http_fetch.h"'},
                           ["auth/ may not import datalayer/"])

    def test_an_app_import_outside_main(self):
        self.assertRefused({"src/proxy/exchange.h": '#include "app/gateway.h"'},
                           ["proxy/ may not import app/"])
        self.assertRefused({"src/admin/metrics.cc": '#include "app/gateway.h"'},
                           ["src/admin/metrics.cc:3", "app/gateway.h"])

    def test_admin_past_its_backend(self):
        for header in ("proxy/exchange.h", "proxy/io_thread.h", "proxy/data_plane.h"):
            self.assertRefused({"src/admin/metrics.cc": f'#include "{header}"'},
                               ["src/admin/metrics.cc:3", "may not include " + header])

    def test_auth_impure(self):
        for header in ("<thread>", "<mutex>", "<fstream>", "<sys/socket.h>",
                       "<boost/asio.hpp>", "<openssl/ssl.h>", "<atomic>"):
            self.assertRefused({"src/auth/jwt.h": f"#include {header}"},
                               ["src/auth/jwt.h:4", "may not include " + header])

    def test_admission_impure_or_reaching_the_data_plane(self):
        for header in ("<thread>", "<mutex>", "<boost/asio.hpp>", "<sys/socket.h>"):
            self.assertRefused({"src/admission/identity.h": f"#include {header}"},
                               ["src/admission/identity.h:1", "may not include " + header])
        self.assertRefused({"src/admission/identity.h": '#include "proxy/exchange.h"'},
                           ["admission/ may not import proxy/"])
        self.assertEqual(check({"src/admission/identity.h": '#include "auth/jwt.h"'}), [])

    def test_an_include_cycle(self):
        self.assertRefused({"src/protocol/routes.h": '#include "protocol/routes.h"'},
                           ["include cycle"])


if __name__ == "__main__":
    unittest.main(verbosity=1)
