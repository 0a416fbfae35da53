def test_x(pytestconfig):
    print(pytestconfig.getini("filterwarnings"))
    assert 0
