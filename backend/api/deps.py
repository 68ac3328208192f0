"""Dependencies the routes declare, as ``Annotated`` aliases (routes never call ``Depends``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from backend.core.config import Settings
from backend.services.health import BigQueryProbe


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_bigquery_probe(request: Request) -> BigQueryProbe:
    probe: BigQueryProbe = request.app.state.bigquery_probe
    return probe


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
BigQueryProbeDep = Annotated[BigQueryProbe, Depends(get_bigquery_probe)]
