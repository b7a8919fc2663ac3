"""mirrorflow's Airflow adapters: hooks, operators and the DAG factories (thin: the logic is in include/).

Airflow puts its plugins folder on ``sys.path``, so DAG files import this package as
``mirrorflow_airflow``; it imports the core library as ``mirrorflow``.
"""
