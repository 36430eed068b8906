"""The model client: request build / reply parse, the HTTP sender, retries, the reply cache.

(Also, for now, the offline simulator: ``simulator.py`` and ``sim_*.py``.) A regular
package, so tools that import files by path (pytest's doctest collection) see its modules as
``groundscope.client.*``.
"""
