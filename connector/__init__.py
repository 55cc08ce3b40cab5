"""cdkds.connector: the Spark adapter (Python Data Source API). Built by the connector issue."""
