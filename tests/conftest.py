"""Each test package's fixtures live in a module of its own, registered here (fixtures are not
imported as modules: helpers shared by tests are in ordinary modules beside them)."""

pytest_plugins = ["tests.unit.fixtures", "tests.integration.fixtures"]
