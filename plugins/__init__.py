"""robotid_sim's built-in plugins (installed as the package ``robotid_sim_plugins``).

Each module here is one plugin (a plugin past about 300 lines is a package, e.g. ``sindy/``, whose
``__init__.py`` holds the hooks and the estimator code in modules beside it): it implements one or more hooks of
:mod:`robotid_sim.hookspecs` with ``@hookimpl`` functions, for example::

    @hookimpl
    def register_estimators(register):
        register(OLSEstimator)  # under OLSEstimator.name, "ols"

``core`` registers the built-in excitation types, noise models, bundled robots and model
kinds; ``controllers`` the controllers; ``ols``, ``wls`` and ``irls`` the estimators. They are
the only source of these names: robotid_sim looks every name up in the registries of
:mod:`robotid_sim.plugins`, where the first registration of a name wins and the built-ins
register first.

Nothing in robotid_sim imports these modules by name. Each is declared as an entry point of
the ``robotid_sim`` group in robotid_sim's ``pyproject.toml`` (``ols =
"robotid_sim_plugins.ols"``) and loaded by :mod:`robotid_sim.plugins` exactly like a
third-party plugin package would be, so the built-ins are the reference examples of the plugin
interface (see ``docs/plugins.md``). A new built-in plugin is a new module (or package) here
named after what it registers (an estimator plugin after its estimator's ``name``), its
entry-point line ``<module> = "robotid_sim_plugins.<module>"`` and the same module in
:data:`robotid_sim.plugins.DEFAULT_PLUGINS` (which keeps it available when the installed package
metadata is stale); ``tests/test_plugins.py`` checks that the three agree.
"""
