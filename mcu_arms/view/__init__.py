"""The results browser (`mcu-arms view`, `mcu-arms report --html`): why did arm A score lower than arm B?

Floor 5, beside report/: it shows report/analysis.py's Analysis (never a number of its own) and reads each run's
files through the contracts; it starts and stops nothing. `site` lists the pages and their data, `episode` reads one
task of one run,
`pages` renders (jinja2, imported only there), `server` serves on loopback, `extra` finds the optional extra.
"""
