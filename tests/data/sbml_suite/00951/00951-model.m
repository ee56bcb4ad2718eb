(*

category:      Test
synopsis:      Three constant parameters, with initial values of inf, -inf, and NaN.
componentTags: Parameter
testTags:      
testType:      TimeCourse
levels:        1.2, 2.1, 2.2, 2.3, 2.4, 2.5, 3.1, 3.2
generatedBy:   Analytic

This model tests the INF and NaN constructs.

The model contains:
* 3 parameters (P, Q, R)
The initial conditions are as follows:

[{width:35em,margin: 1em auto}|       | *Value* | *Constant* |
| Initial value of parameter P | $INF$ | constant |
| Initial value of parameter Q | $-INF$ | constant |
| Initial value of parameter R | $NaN$ | constant |]

Note: The test data for this model was generated from an analytical
solution of the system of equations.

*)

