"""mirrorflow's Airflow sensors."""
